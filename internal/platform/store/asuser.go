package store

import "k8s.io/client-go/kubernetes"

// AsUser returns a client acting as user's ServiceAccount (impersonated): the API server decides
// what it may do, as for the user's own kubeconfig. Pipelines and previews create their Jobs,
// Secrets and scale their workloads through it.
func (s *Store) AsUser(user string) (kubernetes.Interface, error) { return s.impersonate(user) }
