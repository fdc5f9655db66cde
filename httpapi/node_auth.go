package httpapi

import (
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/nodeproto"
)

type nodeKey struct{}

// isNodeRequest says whether a request is a node agent's: its operation is
// a node route, or it carries a node credential.
func isNodeRequest(need auth.Role, secret string) bool {
	return need == auth.RoleNode || strings.HasPrefix(secret, nodeproto.CredentialPrefix)
}

// nodeAuth authenticates a node agent's request. A node credential reaches
// only its own node's routes; an API token reaches none of them.
func nodeAuth(api huma.API, d Deps, ctx huma.Context, next func(huma.Context), need auth.Role, secret string) {
	fail := func(err error) {
		if errs.Is(err, errs.Unauthorized) {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="sluice"`)
		}
		writeErr(api, ctx, d.Logger, err)
	}
	// A credential that is no one's is refused as such (401) before the
	// route is weighed; a good one on the wrong kind of route is 403.
	switch {
	case secret == "" && need == auth.RoleNode:
		fail(errs.Errorf(errs.Unauthorized, "This route is for a node's agent: send its node credential as \"Authorization: Bearer <credential>\"."))
		return
	case !strings.HasPrefix(secret, nodeproto.CredentialPrefix):
		if _, err := authenticate(ctx.Context(), d, secret); err != nil {
			fail(err)
			return
		}
		fail(errs.Errorf(errs.Forbidden, "This route is for a node's agent; an API token does not reach it."))
		return
	case d.Nodes == nil:
		fail(errs.Errorf(errs.Unavailable, "This server keeps no nodes."))
		return
	}
	n, err := d.Nodes.Authenticate(ctx.Context(), secret)
	if err != nil {
		fail(err)
		return
	}
	if need != auth.RoleNode {
		fail(errs.Errorf(errs.Forbidden, "A node credential reaches only its own node's routes; this one needs an API token with the %s role.", need))
		return
	}
	if want := ctx.Param("name"); want != n.Name {
		fail(errs.Errorf(errs.Forbidden, "The credential of node %s does not reach node %s.", n.Name, want))
		return
	}
	next(huma.WithValue(ctx, nodeKey{}, n))
}
