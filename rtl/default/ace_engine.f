ace_engine.v
