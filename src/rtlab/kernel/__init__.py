"""RT kernels for the boards rtlab measures, RISC-V (VisionFive 2 / JH-7110) first."""
