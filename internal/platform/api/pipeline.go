package api

import "time"

// Pipelines: a run clones a repository and runs `devtool deploy` (or `destroy`) there, as a
// Kubernetes Job in the target namespace, with the caller's own Kubernetes rights (a short-lived
// token of the caller's ServiceAccount). One run at a time per pipeline (namespace, name).
//
//	POST /api/v1/namespaces/{ns}/pipelines                       start a run (PipelineRequest) -> 201 PipelineRun;
//	                                                             200 with Skipped when --skip-if-exists found it deployed;
//	                                                             409 while another run of the pipeline is going on
//	GET  /api/v1/namespaces/{ns}/pipelines                       PipelineList (the latest run of each)
//	GET  /api/v1/namespaces/{ns}/pipelines/{name}                Pipeline (with its kept runs, newest first)
//	GET  /api/v1/namespaces/{ns}/pipelines/{name}/runs/{run}     PipelineRun; ?wait=<seconds> (at most 60) answers as soon
//	                                                             as the run has finished, or after the wait
//	GET  /api/v1/namespaces/{ns}/pipelines/{name}/runs/{run}/log text/plain; ?follow=true streams it live until the run
//	                                                             ends. A finished run's log is its last PipelineLogKiB KiB.
//
// {run} is the run's number, or "latest".

// Pipeline actions.
const (
	ActionDeploy  = "deploy"
	ActionDestroy = "destroy"
)

// Run phases. A run is finished in every phase but Pending and Running.
const (
	PhasePending   = "Pending"   // recorded; its Job not started yet
	PhaseRunning   = "Running"   // its Job runs
	PhaseSucceeded = "Succeeded" // every step ended well
	PhaseFailed    = "Failed"    // a step failed (FailedStep, Message)
	PhaseTimedOut  = "TimedOut"  // stopped by its timeout (the Job's activeDeadlineSeconds)
)

// Finished says whether a run in phase p is over.
func Finished(p string) bool { return p != PhasePending && p != PhaseRunning && p != "" }

// Steps a run goes through, as FailedStep names them.
const (
	StepStart   = "start"   // the Job's pod could not start (image, quota, the token Secret)
	StepClone   = "clone"   // cloning the repository
	StepDeploy  = "deploy"  // devtool deploy
	StepDestroy = "destroy" // devtool destroy
)

// PipelineRequest is the body of POST /api/v1/namespaces/{ns}/pipelines.
type PipelineRequest struct {
	Name   string `json:"name"`   // the pipeline (and environment) name: a DNS label
	Action string `json:"action"` // deploy (default) or destroy
	// Repository is an https:// URL (http:// is accepted, and credentials are never sent over it).
	// A destroy may leave it empty: the last deploy's repository, branch and file are used.
	Repository string `json:"repository,omitempty"`
	Branch     string `json:"branch,omitempty"` // "" = the repository's default branch
	File       string `json:"file,omitempty"`   // the manifest or Compose file, relative to the repository
	// Vars are --var NAME=value pairs for the deploy commands. They reach the run through its
	// Secret, never the Job's spec; the run records their names only.
	Vars           []Var `json:"vars,omitempty"`
	SkipIfExists   bool  `json:"skipIfExists,omitempty"`
	Volumes        bool  `json:"volumes,omitempty"`        // destroy: also the volumes
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"` // 0 = 300; at most 86400
}

// Var is one variable of a run.
type Var struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PipelineRun is one run of a pipeline.
type PipelineRun struct {
	Namespace  string   `json:"namespace"`
	Name       string   `json:"name"`   // the pipeline
	Number     int      `json:"number"` // 1, 2, ... per pipeline
	Action     string   `json:"action"`
	User       string   `json:"user"` // who started it: the run has this user's rights
	Repository string   `json:"repository"`
	Branch     string   `json:"branch,omitempty"` // as asked, or (once cloned) the default branch's name
	Commit     string   `json:"commit,omitempty"` // once cloned
	File       string   `json:"file,omitempty"`
	VarNames   []string `json:"varNames,omitempty"`
	Phase      string   `json:"phase"`
	// Job is the Kubernetes Job running it, in Namespace.
	Job            string     `json:"job,omitempty"`
	TimeoutSeconds int64      `json:"timeoutSeconds"`
	Created        time.Time  `json:"created"`
	Started        *time.Time `json:"started,omitempty"`  // the runner's container started
	Finished       *time.Time `json:"finished,omitempty"` // the run ended
	// CloneMillis is how long the clone took (set once it is done).
	CloneMillis int64 `json:"cloneMillis,omitempty"`
	ExitCode    int   `json:"exitCode,omitempty"`
	// FailedStep is the step that failed (start, clone, deploy, destroy); Message its last output
	// lines or the reason (at most a few KiB).
	FailedStep string `json:"failedStep,omitempty"`
	Message    string `json:"message,omitempty"`
	// Skipped is set on the answer of a deploy with skipIfExists that found the environment
	// deployed: no run was started and Number is the last run's (0 when it was deployed otherwise).
	Skipped bool `json:"skipped,omitempty"`
}

// Pipeline is a pipeline's state: the repository, branch, commit and status of its latest run,
// and the runs the platform keeps (newest first).
type Pipeline struct {
	Namespace  string        `json:"namespace"`
	Name       string        `json:"name"`
	Repository string        `json:"repository"`
	Branch     string        `json:"branch,omitempty"`
	Commit     string        `json:"commit,omitempty"`
	Status     string        `json:"status"` // the latest run's phase
	Runs       []PipelineRun `json:"runs,omitempty"`
}

// PipelineList is GET /api/v1/namespaces/{ns}/pipelines.
type PipelineList struct {
	Items []Pipeline `json:"items"`
}
