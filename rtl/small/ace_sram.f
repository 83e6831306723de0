ace_sram.v
