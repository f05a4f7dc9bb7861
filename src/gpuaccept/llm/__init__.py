"""The LLM workload: a Llama-3-style decoder trained with FSDP2 on synthetic tokens of known
entropy, judged on throughput, MFU, convergence, determinism and stragglers (issue #32)."""
