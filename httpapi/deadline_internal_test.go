package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/require"
)

// A request with a body lasts as long as its work: the body's read deadline
// is for reading the body, and must not cancel the handler after it.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	t.Parallel()

	mux := http.NewServeMux()
	api := newAPI(mux, Deps{})
	o := huma.Operation{OperationID: "slow", Method: http.MethodPost, Path: "/slow", BodyReadTimeout: 100 * time.Millisecond}
	register(api, Deps{}, o, func(ctx context.Context, in *struct {
		Body struct {
			Name string `json:"name"`
		}
	}) (*struct{ Body string }, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		return &struct{ Body string }{Body: "done " + in.Body.Name}, nil
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL+"/slow", "application/json", strings.NewReader(`{"name":"web"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the body's deadline passed while the handler worked")
}

// slowInput takes a second to resolve after its body is read, as decoding
// and checking a large body does on a busy machine.
type slowInput struct {
	Body struct {
		Name string `json:"name"`
	}
}

func (slowInput) Resolve(huma.Context) []error {
	time.Sleep(time.Second)
	return nil
}

// The body's read deadline ends when the body is read, not when the
// handler starts: the checks and decoding between the two may take longer.
func TestBodyDeadlineEndsBeforeTheChecks(t *testing.T) {
	t.Parallel()

	mux := http.NewServeMux()
	api := newAPI(mux, Deps{})
	o := huma.Operation{OperationID: "slow-checks", Method: http.MethodPost, Path: "/slow-checks", BodyReadTimeout: 100 * time.Millisecond}
	register(api, Deps{}, o, func(ctx context.Context, in *slowInput) (*struct{ Body string }, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return &struct{ Body string }{Body: "done " + in.Body.Name}, nil
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL+"/slow-checks", "application/json", strings.NewReader(`{"name":"web"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the body's deadline passed while its checks ran")
}
