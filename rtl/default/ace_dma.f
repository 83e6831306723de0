ace_dma.v
