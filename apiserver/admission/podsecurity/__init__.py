"""Pod Security admission (upstream: staging/src/k8s.io/pod-security-admission): api (levels, versions,
namespace labels), policy (the checks), config (PodSecurityConfiguration), admission (the plugin)."""
