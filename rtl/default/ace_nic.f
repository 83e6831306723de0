ace_nic.v
