"""GPU micro-benchmarks of study 001 as CUDA C++ programs (``microbench.cu``), built with nvcc."""
