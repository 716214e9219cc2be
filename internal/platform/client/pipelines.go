package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
)

// StartPipeline is POST /api/v1/namespaces/{ns}/pipelines. A deploy with SkipIfExists that found
// the environment deployed answers a run with Skipped set.
func (c *Client) StartPipeline(ctx context.Context, ns string, req api.PipelineRequest) (*api.PipelineRun, error) {
	var r api.PipelineRun
	if _, err := c.do(ctx, http.MethodPost, route("namespaces", ns, "pipelines"), req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// MaxRunWait is the longest wait PipelineRun asks the server for (under the request's deadline).
const MaxRunWait = 20 * time.Second

// PipelineRun is GET .../pipelines/{name}/runs/{run} (run: a number or "latest"); with wait > 0
// the server answers as soon as the run has finished, or after wait (at most MaxRunWait).
func (c *Client) PipelineRun(ctx context.Context, ns, name, run string, wait time.Duration) (*api.PipelineRun, error) {
	p := route("namespaces", ns, "pipelines", name, "runs", run)
	if wait > 0 {
		p += "?wait=" + strconv.Itoa(int(min(wait, MaxRunWait)/time.Second))
	}
	var r api.PipelineRun
	if _, err := c.do(ctx, http.MethodGet, p, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Pipeline is GET .../pipelines/{name}: its state and kept runs.
func (c *Client) Pipeline(ctx context.Context, ns, name string) (*api.Pipeline, error) {
	var p api.Pipeline
	if _, err := c.do(ctx, http.MethodGet, route("namespaces", ns, "pipelines", name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Pipelines is GET .../pipelines: the pipelines of a namespace.
func (c *Client) Pipelines(ctx context.Context, ns string) ([]api.Pipeline, error) {
	var l api.PipelineList
	if _, err := c.do(ctx, http.MethodGet, route("namespaces", ns, "pipelines"), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// RunLog copies the log of a run to w (GET .../runs/{run}/log): with follow, live until the run
// ends. There is no deadline on the body, only on the answer's start: ctx ends it.
func (c *Client) RunLog(ctx context.Context, ns, name, run string, follow bool, w io.Writer) error {
	p := route("namespaces", ns, "pipelines", name, "runs", run, "log")
	u := *c.base
	u.Path = p
	if follow {
		u.RawQuery = "follow=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("platform request GET %s: %w", p, err)
	}
	req.Header.Set("Accept", "text/plain")
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, http.MethodGet, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.answerError(http.MethodGet, p, resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("platform %s: reading the log of %s run %s: %w", c.urlString, name, run, err)
	}
	return nil
}

// CreatePreview is POST /api/v1/previews; created is false when an existing preview was redeployed.
func (c *Client) CreatePreview(ctx context.Context, req api.PreviewRequest) (p *api.Preview, created bool, err error) {
	p = &api.Preview{}
	status, err := c.do(ctx, http.MethodPost, route("previews"), req, p)
	if err != nil {
		return nil, false, err
	}
	return p, status == http.StatusCreated, nil
}

// Previews is GET /api/v1/previews.
func (c *Client) Previews(ctx context.Context) ([]api.Preview, error) {
	var l api.PreviewList
	if _, err := c.do(ctx, http.MethodGet, route("previews"), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Preview is GET /api/v1/previews/{name}.
func (c *Client) Preview(ctx context.Context, name string) (*api.Preview, error) {
	var p api.Preview
	if _, err := c.do(ctx, http.MethodGet, route("previews", name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DestroyPreview is DELETE /api/v1/previews/{name}: its destroy run starts (p.Run).
func (c *Client) DestroyPreview(ctx context.Context, name string) (*api.Preview, error) {
	var p api.Preview
	if _, err := c.do(ctx, http.MethodDelete, route("previews", name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// PreviewEndpoints is GET /api/v1/previews/{name}/endpoints (a sleeping preview is woken).
func (c *Client) PreviewEndpoints(ctx context.Context, name string) ([]api.Endpoint, error) {
	var l api.Endpoints
	if _, err := c.do(ctx, http.MethodGet, route("previews", name, "endpoints"), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// WakePreview is POST /api/v1/previews/{name}/wake.
func (c *Client) WakePreview(ctx context.Context, name string) (*api.Preview, error) {
	var p api.Preview
	if _, err := c.do(ctx, http.MethodPost, route("previews", name, "wake"), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// FollowRun streams run n's log to w live until the run ends, then answers the finished run. A
// stream that breaks (a replica restarting) is taken up again, skipping what was already written.
// It ends early only with ctx's error (the run goes on in the cluster).
func (c *Client) FollowRun(ctx context.Context, ns, name string, n int, w io.Writer) (*api.PipelineRun, error) {
	run := strconv.Itoa(n)
	cw := &countWriter{w: w}
	var lastErr error
	for attempt := 0; ; attempt++ {
		err := c.RunLog(ctx, ns, name, run, true, &skipWriter{w: cw, skip: cw.n})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			// a run just started may not be in the answering replica's cache yet: a 404 is asked
			// again for a few seconds; any other refusal would be refused again
			if st := StatusOf(err); st != 0 && st < 500 && !(st == http.StatusNotFound && cw.n == 0 && attempt < 10) {
				return nil, err
			}
			lastErr = err
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		r, rerr := c.PipelineRun(ctx, ns, name, run, MaxRunWait)
		switch {
		case rerr == nil && api.Finished(r.Phase):
			return r, nil
		case rerr != nil && (ctx.Err() != nil || (StatusOf(rerr) != 0 && StatusOf(rerr) < 500)):
			return nil, rerr
		case rerr != nil:
			lastErr = rerr
		}
		if attempt >= 30 && lastErr != nil {
			return nil, fmt.Errorf("following run %d of pipeline %s: %w", n, name, lastErr)
		}
		if lastErr != nil {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// skipWriter drops the first skip bytes (already written by an earlier stream of the same log).
type skipWriter struct {
	w    io.Writer
	skip int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip >= int64(n) {
		s.skip -= int64(n)
		return n, nil
	}
	p = p[s.skip:]
	s.skip = 0
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}
