package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/node"
)

// Node is a node: the operator's labels, what its agent reports, and its
// state in one word with the reason.
type Node struct {
	Name            string            `json:"name" doc:"A DNS label."`
	State           string            `json:"state" enum:"Ready,Unreachable,Cordoned,Needs upgrade,Never reported,Revoked"`
	Reason          string            `json:"reason" doc:"One sentence: why the node is in this state."`
	Labels          map[string]string `json:"labels" doc:"The operator's labels; placement reads them."`
	Reported        NodeReported      `json:"reported" doc:"What the node's agent says of its host, apart from the labels."`
	Local           bool              `json:"local" doc:"True for serve's own node: serve runs its host steps itself."`
	Enrolled        bool              `json:"enrolled" doc:"True once an agent exchanged the join token for a credential."`
	LastHeartbeatAt *time.Time        `json:"lastHeartbeatAt,omitempty"`
	CordonedAt      *time.Time        `json:"cordonedAt,omitempty"`
	CordonedBy      string            `json:"cordonedBy,omitempty"`
	RevokedAt       *time.Time        `json:"revokedAt,omitempty"`
	CreatedAt       time.Time         `json:"createdAt"`
	CreatedBy       string            `json:"createdBy"`
}

// NodeReported is what an agent reports of its host.
type NodeReported struct {
	Hostname     string        `json:"hostname,omitempty" maxLength:"255"`
	OS           string        `json:"os,omitempty" maxLength:"64"`
	Arch         string        `json:"arch,omitempty" maxLength:"64"`
	AgentVersion string        `json:"agentVersion,omitempty" maxLength:"64"`
	Protocol     int           `json:"protocol,omitempty" minimum:"0" maximum:"1000" doc:"The agent protocol version it speaks."`
	Session      string        `json:"session,omitempty" maxLength:"100" doc:"The agent process's id, new at each start: steps an earlier session claimed died with it."`
	Processes    []NodeProcess `json:"processes,omitempty" maxItems:"10000" doc:"What runs on the host for each service, as the agent saw it at its last heartbeat."`
}

// NodeProcess is one service's process as its node's agent reports it.
type NodeProcess struct {
	Service    string `json:"service" maxLength:"63"`
	Running    bool   `json:"running"`
	Pid        int    `json:"pid,omitempty" minimum:"0" maximum:"4194304"`
	NotRunning string `json:"notRunning,omitempty" maxLength:"1000"`
	UnitDigest string `json:"unitDigest,omitempty" maxLength:"100"`
	UnitHash   string `json:"unitHash,omitempty" maxLength:"100"`
	ExeDigest  string `json:"exeDigest,omitempty" maxLength:"100" doc:"The digest of the bytes the process runs; empty when not proven."`
	Matches    bool   `json:"matches" doc:"True when the process runs the unit's artifact, proven by its executable's digest."`
	Proof      string `json:"proof,omitempty" maxLength:"1000"`
	Foreign    string `json:"foreign,omitempty" maxLength:"1000" doc:"Set when what holds the service's name on the host is not sluice's (its ownership marker is gone): reported, never touched."`
}

func nodeOut(n *node.Node) Node {
	r := n.Reported
	return Node{
		Name: n.Name, State: n.State, Reason: n.Reason, Labels: n.Labels, Local: n.Local, Enrolled: n.Enrolled,
		Reported: NodeReported{Hostname: r.Hostname, OS: r.OS, Arch: r.Arch, AgentVersion: r.AgentVersion, Protocol: r.Protocol, Session: r.Session,
			Processes: convertSlice(r.Processes, func(p node.Process) NodeProcess { return NodeProcess(p) })},
		LastHeartbeatAt: n.LastHeartbeatAt, CordonedAt: n.CordonedAt, CordonedBy: n.CordonedBy, RevokedAt: n.RevokedAt,
		CreatedAt: n.CreatedAt, CreatedBy: n.CreatedBy,
	}
}

func reportedIn(r NodeReported) node.Reported {
	return node.Reported{Hostname: r.Hostname, OS: r.OS, Arch: r.Arch, AgentVersion: r.AgentVersion, Protocol: r.Protocol, Session: r.Session,
		Processes: convertSlice(r.Processes, func(p NodeProcess) node.Process { return node.Process(p) })}
}

func convertSlice[A, B any](in []A, f func(A) B) []B {
	if in == nil {
		return nil
	}
	out := make([]B, len(in))
	for i, a := range in {
		out[i] = f(a)
	}
	return out
}

type nodeNameInput struct {
	Name string `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$" doc:"The node's name."`
}

type nodeOutput struct {
	Body struct {
		Node      Node       `json:"node"`
		JournalID *uuid.UUID `json:"journalId,omitempty" format:"uuid" doc:"The receipt of the change."`
		// Services is set by get-node.
		Services []NodeService `json:"services,omitempty" doc:"What the receipts left running on the node (get-node only)."`
	}
}

// NodeService is a service left running on a node.
type NodeService struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// NodeAdded answers add-node.
type NodeAdded struct {
	Node      Node      `json:"node"`
	JoinToken string    `json:"joinToken" doc:"Shown once: the agent exchanges it once for the node's credential."`
	ExpiresAt time.Time `json:"expiresAt"`
	JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The receipt of the change."`
}

type nodeAddedOutput struct{ Body NodeAdded }

// nodeAdded answers add-node and rotate-node: the node, its join token and
// the receipt.
func nodeAdded(res *node.AddResult) *nodeAddedOutput {
	out := &nodeAddedOutput{}
	out.Body.Node, out.Body.JoinToken, out.Body.ExpiresAt, out.Body.JournalID = nodeOut(res.Node), res.JoinToken, res.ExpiresAt, res.Run.ID
	return out
}

// NodeList answers list-nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

type nodeListOutput struct{ Body NodeList }

// NodeDeleted answers delete-node.
type NodeDeleted struct {
	JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The receipt of the change."`
}

type nodeDeletedOutput struct{ Body NodeDeleted }

// NodeJoined answers join-node.
type NodeJoined struct {
	Credential string `json:"credential" doc:"The node's credential: keep it (mode 0600); it is never shown again."`
	Node       Node   `json:"node"`
}

type nodeJoinedOutput struct{ Body NodeJoined }

func nodeChanged(n *node.Node, run *db.JournalRun) *nodeOutput {
	out := &nodeOutput{}
	out.Body.Node = nodeOut(n)
	if run != nil {
		out.Body.JournalID = &run.ID
	}
	return out
}

func registerNodes(api huma.API, d Deps) {
	o := op("add-node", http.MethodPost, "/nodes",
		"Add a node with the labels placement reads, and show its one-time join token once (it expires in 24 h). "+
			"Start `sluice agent` on the host with SLUICE_NODE_NAME and SLUICE_JOIN_TOKEN.",
		auth.RoleAdmin, http.StatusConflict, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusCreated
	register(api, d, o, func(ctx context.Context, in *struct {
		Body struct {
			Name   string            `json:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
			Labels map[string]string `json:"labels,omitempty" maxProperties:"64"`
		}
	}) (*nodeAddedOutput, error) {
		res, err := d.Nodes.Add(ctx, in.Body.Name, in.Body.Labels, requester(ctx))
		if err != nil {
			return nil, err
		}
		return nodeAdded(res), nil
	})

	register(api, d, op("list-nodes", http.MethodGet, "/nodes", "List the nodes with their states.", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*nodeListOutput, error) {
			nodes, err := d.Nodes.List(ctx)
			if err != nil {
				return nil, err
			}
			out := &nodeListOutput{}
			out.Body.Nodes = make([]Node, 0, len(nodes))
			for _, n := range nodes {
				out.Body.Nodes = append(out.Body.Nodes, nodeOut(n))
			}
			return out, nil
		})

	register(api, d, op("get-node", http.MethodGet, "/nodes/{name}", "Get one node.", auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *nodeNameInput) (*nodeOutput, error) {
			n, err := d.Nodes.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			placed, err := d.Nodes.Services(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			out := nodeChanged(n, nil)
			out.Body.Services = make([]NodeService, len(placed))
			for i, p := range placed {
				out.Body.Services[i] = NodeService{Name: p.Name, Digest: p.Digest}
			}
			return out, nil
		})

	register(api, d, op("cordon-node", http.MethodPost, "/nodes/{name}/cordon",
		"Cordon a node: nothing new is placed there; what runs keeps running. Journaled.", auth.RoleOperator,
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *nodeNameInput) (*nodeOutput, error) {
			n, run, err := d.Nodes.Cordon(ctx, in.Name, requester(ctx))
			if err != nil {
				return nil, err
			}
			return nodeChanged(n, run), nil
		})

	register(api, d, op("uncordon-node", http.MethodPost, "/nodes/{name}/uncordon",
		"Uncordon a node: placement may use it again. Journaled.", auth.RoleOperator,
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *nodeNameInput) (*nodeOutput, error) {
			n, run, err := d.Nodes.Uncordon(ctx, in.Name, requester(ctx))
			if err != nil {
				return nil, err
			}
			return nodeChanged(n, run), nil
		})

	register(api, d, op("set-node-labels", http.MethodPut, "/nodes/{name}/labels",
		"Replace a node's labels (they decide placement). Journaled.", auth.RoleAdmin,
		http.StatusNotFound, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *struct {
			Name string `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
			Body struct {
				Labels map[string]string `json:"labels" maxProperties:"64"`
			}
		}) (*nodeOutput, error) {
			n, run, err := d.Nodes.SetLabels(ctx, in.Name, in.Body.Labels, requester(ctx))
			if err != nil {
				return nil, err
			}
			return nodeChanged(n, run), nil
		})

	register(api, d, op("revoke-node", http.MethodPost, "/nodes/{name}/revoke",
		"Revoke a node's credential: its agent is refused from then on, and says why. Journaled.", auth.RoleAdmin,
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *nodeNameInput) (*nodeOutput, error) {
			n, run, err := d.Nodes.Revoke(ctx, in.Name, requester(ctx))
			if err != nil {
				return nil, err
			}
			return nodeChanged(n, run), nil
		})

	register(api, d, op("rotate-node", http.MethodPost, "/nodes/{name}/rotate",
		"Issue a node a new one-time join token, shown once (it expires in 24 h), for a new credential. "+
			"The agent started with it (SLUICE_JOIN_TOKEN) exchanges it, and the node's current credential ends at that moment; "+
			"until then the running agent keeps working. A revoked node is enrolled afresh: its old credential stays dead. Journaled.",
		auth.RoleAdmin, http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *nodeNameInput) (*nodeAddedOutput, error) {
			res, err := d.Nodes.Rotate(ctx, in.Name, requester(ctx))
			if err != nil {
				return nil, err
			}
			return nodeAdded(res), nil
		})

	register(api, d, op("delete-node", http.MethodDelete, "/nodes/{name}",
		"Delete a node. Journaled.", auth.RoleAdmin, http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *nodeNameInput) (*nodeDeletedOutput, error) {
			run, err := d.Nodes.Delete(ctx, in.Name, requester(ctx), nil)
			if err != nil {
				return nil, err
			}
			out := &nodeDeletedOutput{}
			out.Body.JournalID = run.ID
			return out, nil
		})

	// The agent's routes. join is authenticated by the join token in its
	// body; heartbeat by the node's credential, which reaches only its node.
	jo := huma.Operation{
		OperationID: "join-node", Method: http.MethodPost, Path: Prefix + "/nodes/{name}/join",
		Summary:     "Exchange a node's one-time join token for its credential (the agent does this once).",
		Description: "Exchange a node's one-time join token for its credential (the agent does this once). Authenticated by the join token, not a bearer token.",
		Errors:      []int{http.StatusUnauthorized, http.StatusUnprocessableEntity},
		// No bearer token: the join token in the body is the credential.
		Security: []map[string][]string{{}},
	}
	register(api, d, jo, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
		Body struct {
			JoinToken string       `json:"joinToken" maxLength:"200"`
			Reported  NodeReported `json:"reported"`
		}
	}) (*nodeJoinedOutput, error) {
		cred, n, err := d.Nodes.Join(ctx, in.Name, in.Body.JoinToken, reportedIn(in.Body.Reported))
		if err != nil {
			return nil, err
		}
		out := &nodeJoinedOutput{}
		out.Body.Credential, out.Body.Node = cred, nodeOut(n)
		return out, nil
	})

	ho := op("heartbeat-node", http.MethodPost, "/nodes/{name}/heartbeat",
		"An agent's heartbeat, about every 10 s: the node reads Unreachable after the silence. "+
			"Authenticated by the node's credential. 409 when another agent holds the node.",
		auth.RoleNode, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	// A heartbeat carries what the host says (its processes' proofs name
	// paths): a host report.
	ho.Metadata[hostReportKey] = true
	register(api, d, ho, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
		Body struct {
			Instance string       `json:"instance" minLength:"1" maxLength:"100" doc:"The agent process's own id: a second agent of the node is refused."`
			Reported NodeReported `json:"reported"`
		}
	}) (*nodeOutput, error) {
		// nodeAuth read the node's row for its credential (and checked it is
		// in.Name's): the heartbeat goes on from it.
		row, _ := ctx.Value(nodeKey{}).(*db.Node)
		if row == nil {
			return nil, errs.Errorf(errs.Unauthorized, "This route is for a node's agent: send its node credential.")
		}
		n, err := d.Nodes.Heartbeat(row, in.Body.Instance, reportedIn(in.Body.Reported))
		if err != nil {
			return nil, err
		}
		return nodeChanged(n, nil), nil
	})
}
