"""A stand-in for the Kubernetes Python client (the few calls gpuaccept makes), over a node list
in the JSON file $FAKE_KUBE_STATE, as `kubectl get nodes -o json` prints it. $FAKE_KUBE_DOWN: the
API does not answer (HTTP 503; `refused`: no connection; `status-only`: an error with a status
alone); $FAKE_KUBE_PATCH_DENIED: a patch is forbidden (HTTP 403)."""
