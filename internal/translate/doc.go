// Package translate turns a loaded Compose project into Kubernetes objects. It is a pure
// function: no I/O, no clock, no randomness, so its output is tested with golden files
// (testdata/, rewritten with `go test ./internal/translate -update`).
//
// The rules, file by file:
//
//   - workload.go: restart other than always → batch/v1 Job (never: backoffLimit 0 and
//     restartPolicy Never; on-failure: restartPolicy OnFailure, backoffLimit = max_attempts when
//     set); else a named or anonymous volume → StatefulSet; else Deployment. scale → replicas
//     (a Job runs scale pods in parallel). Deployments default to Recreate, StatefulSets to
//     RollingUpdate; the dev.devtool/update service label overrides within spec A5's kind rules,
//     and a value that does not fit the kind is an error.
//   - labels.go: the pod selector is app.kubernetes.io/name=<service> and
//     dev.devtool/deployed-by=<environment>, nothing else, so it never changes between deploys.
//     Every object carries deployed-by and app.kubernetes.io/managed-by=devtool. Compose labels
//     become annotations on the workload and its pod template.
//   - container.go, probes.go, pod.go: the container (entrypoint → command, command → args,
//     environment sorted by name, capabilities, resources, IfNotPresent), healthcheck → readiness
//     and/or liveness probe, stop_grace_period, x-node-selector.
//   - service.go: a ClusterIP Service named like the Compose service when it has ports; one port
//     per container port, plus host → container when a host port differs.
//   - ingress.go, ports.go: public ports (host:container, TCP, not in NeverPublicPorts) and
//     endpoints become Ingresses with host <name>-<namespace>.<cluster domain>; without a cluster
//     domain, Ingresses carry no host and Result.Warnings says why.
//   - volumes.go, affinity.go, initvolumes.go: named volumes → shared PVCs, anonymous volumes →
//     claim templates (emptyDir in a Job), host volumes are not mounted; services sharing a
//     ReadWriteOnce volume are co-scheduled; an init container seeds empty volumes from the image.
//   - order.go: Result.Services in depends_on order, file order otherwise.
//   - yaml.go: ToYAML, the deterministic multi-document rendering used by deploy --dry-run.
package translate
