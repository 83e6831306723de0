ace_alu_array.v
