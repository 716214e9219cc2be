package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/platform/store"
)

// Limits of a request.
const (
	maxVars      = 200
	maxVarBytes  = 256 << 10
	tokenMargin  = 2 * time.Minute  // the token outlives the timeout by this much
	minTokenLife = 10 * time.Minute // the API server's minimum for a TokenRequest
	stuckAfter   = 2 * time.Minute  // a run recorded without a Job after this long failed to start
)

// CheckRequest checks a run's request as Submit does, without running it (req is not changed): the
// preview manager checks a preview's run before it makes the preview's record and namespace.
func CheckRequest(req api.PipelineRequest) error {
	return checkRequest(&req)
}

// The environment's record written by devtool deploy (internal/deploy's StateName and
// StatusDeployed; a test keeps them equal).
const (
	envStatePrefix    = "devtool-env-"
	envStatusDeployed = "deployed"
)

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func itoa(n int) string { return strconv.Itoa(n) }

func checkRequest(req *api.PipelineRequest) error {
	if why := runspec.ValidName(req.Name); why != "" {
		return &store.InputError{Field: "name", Reason: why}
	}
	switch req.Action {
	case "":
		req.Action = api.ActionDeploy
	case api.ActionDeploy, api.ActionDestroy:
	default:
		return &store.InputError{Field: "action", Reason: "deploy or destroy"}
	}
	if req.Repository != "" {
		if _, err := runspec.CheckRepository(req.Repository); err != nil {
			return &store.InputError{Field: "repository", Reason: err.Error()}
		}
	} else if req.Action == api.ActionDeploy {
		return &store.InputError{Field: "repository", Reason: "required"}
	}
	if req.Branch != "" {
		if err := runspec.CheckBranch(req.Branch); err != nil {
			return &store.InputError{Field: "branch", Reason: err.Error()}
		}
	}
	if req.File != "" {
		if err := runspec.CheckFile(req.File); err != nil {
			return &store.InputError{Field: "file", Reason: err.Error()}
		}
	}
	if len(req.Vars) > maxVars {
		return &store.InputError{Field: "vars", Reason: fmt.Sprintf("at most %d", maxVars)}
	}
	size := 0
	for _, v := range req.Vars {
		if !varName.MatchString(v.Name) {
			return &store.InputError{Field: "vars", Reason: fmt.Sprintf("%q is not a variable name (letters, digits and '_', not starting with a digit)", v.Name)}
		}
		if deploy.Reserved(v.Name) {
			return &store.InputError{Field: "vars", Reason: fmt.Sprintf("%s is reserved: deploy sets it itself", v.Name)}
		}
		size += len(v.Name) + len(v.Value)
	}
	if size > maxVarBytes {
		return &store.InputError{Field: "vars", Reason: fmt.Sprintf("at most %d bytes in all", maxVarBytes)}
	}
	switch {
	case req.TimeoutSeconds == 0:
		req.TimeoutSeconds = int64(DefaultTimeout / time.Second)
	case req.TimeoutSeconds < 1 || req.TimeoutSeconds > int64(MaxTimeout/time.Second):
		return &store.InputError{Field: "timeoutSeconds", Reason: fmt.Sprintf("between 1 and %d", int64(MaxTimeout/time.Second))}
	}
	return nil
}

// SubmitOptions are what the caller of Submit decides beyond the request.
type SubmitOptions struct {
	// Secrets are the stored secrets the run sees (already resolved by the caller: a user's run gets
	// admin < user < namespace, a preview's only the preview-scoped and its namespace's).
	Secrets map[string]string
	// Preview marks the run as a preview's.
	Preview string
	// Trusted says the caller (the platform itself, for a preview) made sure the user may run it in
	// ns, which it may have just made: membership is not read from the caches, and a refusal of the
	// run's Secret is retried for a few seconds while the new binding reaches the API server's
	// authorizer. The API server still decides, as for every run.
	Trusted bool
}

// Submit starts a run of req in ns for caller: it checks the request and the caller's membership
// (a viewer may not run pipelines), refuses while another run of the pipeline is going on (409
// naming it), records the run, and creates its Secret and Job impersonating the caller.
func (m *Manager) Submit(ctx context.Context, caller *store.User, ns string, req api.PipelineRequest, so SubmitOptions) (*Run, error) {
	if !m.Enabled() {
		return nil, ErrNotConfigured
	}
	if err := checkRequest(&req); err != nil {
		return nil, err
	}
	role := api.RoleOwner
	if !so.Trusted {
		var err error
		if role, err = m.memberRole(caller, ns); err != nil {
			return nil, err
		}
	}
	if role == api.RoleViewer {
		return nil, fmt.Errorf("you are a viewer of namespace %q: running a pipeline there needs the editor or owner role: %w", ns, store.ErrForbidden)
	}
	kc, err := m.o.Store.AsUser(caller.Name)
	if err != nil {
		return nil, err
	}
	prev, err := m.liveRuns(ctx, ns, req.Name)
	if err != nil {
		return nil, err
	}
	number := 1
	if len(prev) > 0 {
		last := prev[0]
		if !api.Finished(last.Phase) {
			return nil, m.busy(last)
		}
		number = last.Number + 1
		if req.Action == api.ActionDestroy && req.Repository == "" {
			req.Repository, req.File = last.Repository, last.File
			if req.Branch == "" {
				req.Branch = last.Branch
			}
		}
	}
	if req.Repository == "" {
		return nil, fmt.Errorf("pipeline %q in namespace %q has no run to take the repository from: give --repository: %w", req.Name, ns, store.ErrNotFound)
	}
	if req.SkipIfExists && req.Action == api.ActionDeploy {
		if skipped, err := m.deployed(ctx, kc, ns, req.Name, prev); err != nil || skipped != nil {
			return skipped, err
		}
	}
	r := &Run{PipelineRun: api.PipelineRun{
		Namespace: ns, Name: req.Name, Number: number, Action: req.Action, User: caller.Name,
		Repository: req.Repository, Branch: req.Branch, File: req.File, Phase: api.PhasePending,
		Job: JobName(req.Name, number), TimeoutSeconds: req.TimeoutSeconds,
	}, Volumes: req.Volumes, Preview: so.Preview}
	for _, v := range req.Vars {
		r.VarNames = append(r.VarNames, v.Name)
	}
	sort.Strings(r.VarNames)
	r.VarNames = compactStrings(r.VarNames)
	r.Anchor = "devtool-run-token-" + ID(ns, req.Name, number)
	u, err := m.o.Store.Dyn.Resource(RunResource).Namespace(m.o.Store.Namespace).Create(ctx, r.object(m.o.Store.Namespace), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// another replica started run n at the same moment
		if cur, err := m.liveRuns(ctx, ns, req.Name); err == nil && len(cur) > 0 && !api.Finished(cur[0].Phase) {
			return nil, m.busy(cur[0])
		}
		return nil, fmt.Errorf("pipeline %q: another run started at the same moment; try again: %w", req.Name, store.ErrConflict)
	} else if err != nil {
		return nil, fmt.Errorf("recording the run: %w", err)
	}
	created := runFrom(u)
	created.Created = u.GetCreationTimestamp().UTC()
	started, err := m.start(ctx, kc, created, req, so, u.GetUID())
	if err != nil {
		msg := err.Error()
		step := api.StepStart
		if _, uerr := m.update(context.WithoutCancel(ctx), created, func(x *Run) {
			now := m.o.Now().UTC()
			x.Phase, x.FailedStep, x.Message, x.Finished = api.PhaseFailed, step, msg, &now
		}); uerr != nil {
			m.o.Log.Warn("run not recorded as failed", "run", ID(ns, req.Name, number), "err", uerr)
		}
		m.deleteAnchor(context.WithoutCancel(ctx), created)
		return nil, err
	}
	return started, nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// busy is the refusal of a second run while run r is going on.
func (m *Manager) busy(r *Run) error {
	age := m.o.Now().Sub(r.Created).Round(time.Second)
	return fmt.Errorf("pipeline %q in namespace %q is running: run #%d (%s), started by %s %s ago; one run at a time: wait for it to end ('devtool pipeline logs --name %s --namespace %s -f'): %w",
		r.Name, r.Namespace, r.Number, r.Action, r.User, age, r.Name, r.Namespace, store.ErrConflict)
}

// deployed answers a skipped run when the environment is deployed already (its state record, read
// as the caller, says deployed).
func (m *Manager) deployed(ctx context.Context, kc kubernetes.Interface, ns, name string, prev []*Run) (*Run, error) {
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, envStatePrefix+name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading the state of environment %s in %s: the Kubernetes API refused it for your account: %w", name, ns, store.ErrForbidden)
	case err != nil:
		return nil, fmt.Errorf("reading the state of environment %s in %s: %w", name, ns, err)
	}
	if cm.Data["status"] != envStatusDeployed {
		return nil, nil
	}
	out := &Run{PipelineRun: api.PipelineRun{Namespace: ns, Name: name, Action: api.ActionDeploy, Phase: api.PhaseSucceeded, Skipped: true,
		Branch: cm.Data["branch"], Repository: cm.Data["repository"]}}
	if len(prev) > 0 {
		out.PipelineRun = prev[0].API()
		out.Skipped = true
	}
	return out, nil
}

// start makes the run's token (bound to an anchor Secret of the platform), its Secret and its Job
// (both impersonating the caller), and records the run as running.
func (m *Manager) start(ctx context.Context, kc kubernetes.Interface, r *Run, req api.PipelineRequest, so SubmitOptions, runUID types.UID) (*Run, error) {
	st := m.o.Store
	anchor := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: r.Anchor, Namespace: st.Namespace,
		Labels: map[string]string{LabelPipeline: r.Name, LabelNamespace: r.Namespace, store.LabelManaged: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: store.Group + "/" + store.Version, Kind: "PipelineRun",
			Name: ID(r.Namespace, r.Name, r.Number), UID: runUID}},
	}, Type: corev1.SecretTypeOpaque}
	a, err := st.Kube.CoreV1().Secrets(st.Namespace).Create(ctx, anchor, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the run's token anchor: %w", err)
	}
	life := max(time.Duration(r.TimeoutSeconds)*time.Second+tokenMargin, minTokenLife)
	secs := int64(life / time.Second)
	tr := &authv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: store.SAName(r.User)}, Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs,
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: a.Name, UID: a.UID}}}
	tok, err := st.Kube.CoreV1().ServiceAccounts(st.Namespace).CreateToken(ctx, store.SAName(r.User), tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token of %s's ServiceAccount: %w", r.User, err)
	}
	spec := runspec.Spec{Action: r.Action, Namespace: r.Namespace, Name: r.Name, User: r.User, Number: r.Number,
		Repository: r.Repository, Branch: r.Branch, File: r.File, Volumes: r.Volumes,
		Deadline: r.Created.Add(time.Duration(r.TimeoutSeconds) * time.Second), Secrets: so.Secrets,
		ClusterDomain: m.o.Domain, Registry: m.o.Registry, IngressClass: m.o.IngressClass, EndpointPort: m.o.EndpointPort}
	files := map[string][]byte{runspec.TokenFile: []byte(tok.Status.Token), runspec.CAFile: m.o.CA}
	if m.o.Builder != "" && m.o.BuilderCA != nil {
		// the hosted BuildKit's client certificate for the run's user, as the CLI gets one
		// (POST /builder/credentials), living as long as the run's token
		key, csr, err := pki.NewClientKey(r.User)
		if err != nil {
			return nil, fmt.Errorf("the run's build service key: %w", err)
		}
		cert, _, err := m.o.BuilderCA.SignClient(csr, r.User, m.o.Now(), life)
		if err != nil {
			return nil, fmt.Errorf("the run's build service certificate: %w", err)
		}
		files[runspec.BuilderCertFile], files[runspec.BuilderKeyFile], files[runspec.BuilderCAFile] = cert, key, m.o.BuilderCA.CertPEM
		spec.Builder = m.o.Builder
	}
	if len(req.Vars) > 0 {
		spec.Vars = map[string]string{}
		for _, v := range req.Vars {
			spec.Vars[v.Name] = v.Value
		}
	}
	if u, err := url.Parse(r.Repository); err == nil && u.Scheme == "https" {
		spec.GitCA = so.Secrets[runspec.GitCASecret(u.Host)]
		if t := so.Secrets[runspec.GitTokenSecret(u.Host)]; t != "" {
			spec.GitToken = t
			spec.GitUsername = so.Secrets[runspec.GitUserSecret(u.Host)]
			if spec.GitUsername == "" {
				spec.GitUsername = runspec.DefaultGitUsername
			}
		}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	files[runspec.SpecFile] = specJSON
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: r.Job, Namespace: r.Namespace, Labels: runLabels(r)},
		Type:       corev1.SecretTypeOpaque,
		Data:       files,
	}
	_, err = kc.CoreV1().Secrets(r.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	for wait := 100 * time.Millisecond; so.Trusted && apierrors.IsForbidden(err) && wait < 5*time.Second; wait *= 2 {
		select { // a binding just made is not yet in the authorizer's cache
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		_, err = kc.CoreV1().Secrets(r.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		// left by an earlier run of the same number (its records were removed): replace it
		if err := kc.CoreV1().Secrets(r.Namespace).Delete(ctx, r.Job, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, asUserError(err, "replacing the Secret "+r.Job)
		}
		if _, err := kc.CoreV1().Secrets(r.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return nil, asUserError(err, "creating the run's Secret")
		}
	} else if err != nil {
		return nil, asUserError(err, "creating the run's Secret")
	}
	job, err := kc.BatchV1().Jobs(r.Namespace).Create(ctx, m.job(r), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		bg := metav1.DeletePropagationBackground
		if err := kc.BatchV1().Jobs(r.Namespace).Delete(ctx, r.Job, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			m.deleteRunSecret(ctx, kc, r)
			return nil, asUserError(err, "replacing the Job "+r.Job)
		}
		job, err = kc.BatchV1().Jobs(r.Namespace).Create(ctx, m.job(r), metav1.CreateOptions{})
	}
	if err != nil {
		m.deleteRunSecret(ctx, kc, r)
		return nil, asUserError(err, "creating the run's Job")
	}
	// The Secret goes with the Job (garbage collection) should the platform not delete it itself.
	owner := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":%q,"uid":%q}]}}`, job.Name, job.UID)
	if _, err := kc.CoreV1().Secrets(r.Namespace).Patch(ctx, r.Job, types.MergePatchType, []byte(owner), metav1.PatchOptions{}); err != nil {
		m.o.Log.Warn("the run's Secret has no owner", "run", ID(r.Namespace, r.Name, r.Number), "err", err)
	}
	return m.update(ctx, r, func(x *Run) { x.Phase = api.PhaseRunning })
}

// asUserError says the API server refused something done as the user.
func asUserError(err error, what string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: the Kubernetes API refused it for your account (%v): %w", what, apierrors.ReasonForError(err), store.ErrForbidden)
	}
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return fmt.Errorf("%s: %v", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (m *Manager) deleteRunSecret(ctx context.Context, kc kubernetes.Interface, r *Run) {
	if err := kc.CoreV1().Secrets(r.Namespace).Delete(ctx, r.Job, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		m.o.Log.Warn("the run's Secret was not deleted", "run", ID(r.Namespace, r.Name, r.Number), "err", err)
	}
}

// deleteAnchor revokes the run's token (it is bound to the anchor Secret).
func (m *Manager) deleteAnchor(ctx context.Context, r *Run) {
	if r.Anchor == "" {
		return
	}
	err := m.o.Store.Kube.CoreV1().Secrets(m.o.Store.Namespace).Delete(ctx, r.Anchor, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		m.o.Log.Warn("the run's token anchor was not deleted", "run", ID(r.Namespace, r.Name, r.Number), "err", err)
	}
}
