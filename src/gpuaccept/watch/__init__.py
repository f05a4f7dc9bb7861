"""`gpuaccept watch` between jobs (issue #54 §1): a poll of NVML and the kernel log judged by the
rules `accept` judges with (`poll`), findings held over consecutive polls before they are raised
(`debounce`), and the Prometheus metrics a scrape reads (`metrics`). The command, its loop, the
history and the action layer are `commands.watch`'s."""
