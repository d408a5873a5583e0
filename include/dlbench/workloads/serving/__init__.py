"""The ``serving`` suite's workload: an LLM inference server (vLLM) on the machine under test, a
standard load generator (vLLM's ``vllm bench serve``) driving it, and the request rate it sustains
at the profile's latency target (docs/serving.md)."""
