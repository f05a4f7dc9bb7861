"""A stand-in for the Kubernetes Python client (the few calls gpuaccept makes), over a node list
in the JSON file $FAKE_KUBE_STATE, as `kubectl get nodes -o json` prints it. $FAKE_KUBE_DOWN set:
the API does not answer (HTTP 503)."""
