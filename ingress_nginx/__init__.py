"""ingress_nginx: minik8s's ingress controller (upstream kubernetes/ingress-nginx). It watches the Ingresses of
its class (IngressClasses whose controller is `k8s.io/ingress-nginx`), Services, EndpointSlices and TLS Secrets,
renders one nginx.conf (model.py → template.py), tests it with `nginx -t`, swaps it in and reloads nginx
gracefully (nginx.py) only when it changed, and, as leader, writes the Ingresses' status.loadBalancer
(controller.py). nginx runs on the host, as kube-proxy does, on configurable ports."""
