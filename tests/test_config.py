"""AceConfig: validation names the parameter, value and range; files load; names resolve."""

import json

import pytest

from ace.config import NAMED_CONFIGS, AceConfig, load_config
from ace.errors import ConfigError


@pytest.mark.parametrize("name", sorted(NAMED_CONFIGS))
def test_named_configs_are_valid_and_hashable(name):
    config = NAMED_CONFIGS[name]
    assert config.name == name
    assert hash(config) == hash(AceConfig(**config.to_dict()))
    assert config.alu_lanes * 4 == config.link_bytes


@pytest.mark.parametrize("field,value,fragment", [
    ("num_links", 0, "num_links: 0 is out of range; allowed: an integer from 1 to 16"),
    ("num_links", 17, "num_links: 17"),
    ("link_bytes", 24, "a power of two from 4 to 128"),
    ("sram_banks", 3, "sram_banks: 3"),
    ("num_channels", "4", "num_channels: '4' is not an integer"),
    ("num_channels", True, "num_channels: True is not an integer"),
    ("clock_mhz", 0, "clock_mhz: 0 is out of range"),
    ("name", "has space", "name: 'has space' is not valid"),
    ("clock_gating", "latch", "clock_gating: 'latch' is not allowed; allowed: enable, clock"),
    ("max_burst_beats", 256, "exceeds 4096"),
    ("mem_bytes", 32, "mem_bytes: 32 is not allowed with link_bytes 64; allowed: 1, 2 or 4 x "
                      "link_bytes = 64, 128"),
    ("input_buffer_bytes", 1024, "input_buffer_bytes: 1024 is too small"),
])
def test_bad_values_name_parameter_and_range(field, value, fragment):
    with pytest.raises(ConfigError) as error:
        AceConfig(**{field: value})
    assert fragment in str(error.value)


def test_load_toml_with_base(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('base = "small"\nname = "mine"\nnum_channels = 4\n')
    config = load_config(path)
    assert config.num_channels == 4
    assert config.link_bytes == NAMED_CONFIGS["small"].link_bytes
    assert config.name == "mine"


def test_load_json(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "j", "num_links": 2}))
    assert load_config(path).num_links == 2


def test_file_errors_name_the_file_and_parameter(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("num_lanes = 4\n")
    with pytest.raises(ConfigError, match=r"bad\.toml.*unknown parameter 'num_lanes'"):
        load_config(path)
    path.write_text("num_links = 99\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: num_links: 99 is out of range"):
        load_config(path)
    path.write_text("num_links = \n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="neither a named configuration"):
        load_config("nonexistent_name")


def test_digest_changes_with_any_parameter():
    base = NAMED_CONFIGS["small"]
    assert base.digest != base.replace(num_channels=3).digest


def test_docs_reference_table_is_current():
    from pathlib import Path

    from ace.config import reference_table
    doc = (Path(__file__).resolve().parent.parent / "docs" / "config.md").read_text()
    assert reference_table() in doc, "docs/config.md is stale: paste ace.config.reference_table()"


def test_memory_ids_must_number_every_master():
    with pytest.raises(ConfigError, match="mem_id_bits: 4 .* at least 5"):
        AceConfig(num_channels=16, mem_id_bits=4)
    assert AceConfig(num_channels=16, mem_id_bits=5).mem_id_bits == 5


@pytest.mark.parametrize("link_bytes,mem_bytes,words", [(16, 16, 1), (16, 32, 2), (16, 64, 4),
                                                        (64, 128, 2), (4, 16, 4)])
def test_memory_port_may_be_1_2_or_4_links_wide(link_bytes, mem_bytes, words):
    config = NAMED_CONFIGS["small"].replace(link_bytes=link_bytes, mem_bytes=mem_bytes,
                                            max_burst_beats=16)
    assert config.mem_beat_words == words


@pytest.mark.parametrize("link_bytes,mem_bytes,allowed", [
    (16, 8, "16, 32, 64"), (16, 128, "16, 32, 64"), (32, 64 + 32, None), (64, 16, "64, 128")])
def test_memory_port_width_errors_name_the_allowed_widths(link_bytes, mem_bytes, allowed):
    with pytest.raises(ConfigError) as error:
        NAMED_CONFIGS["small"].replace(link_bytes=link_bytes, mem_bytes=mem_bytes,
                                       max_burst_beats=16)
    assert str(error.value).startswith(f"mem_bytes: {mem_bytes}")
    if allowed:
        assert f"1, 2 or 4 x link_bytes = {allowed}" in str(error.value)
