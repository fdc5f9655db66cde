package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/artifact"
	"sluice/internal/artifactstore"
	"sluice/internal/auth"
	"sluice/internal/errs"
)

// ArtifactInfo describes a stored artifact.
type ArtifactInfo struct {
	Digest    string     `json:"digest" doc:"sha256:<hex> of the content: how services pin it." example:"sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"`
	Size      int64      `json:"size" doc:"Bytes."`
	JournalID *uuid.UUID `json:"journalId,omitempty" format:"uuid" doc:"The receipt of the upload that stored these bytes; absent when they were stored before, which changed nothing."`
}

// StoredArtifact is an artifact in the store's list.
type StoredArtifact struct {
	Digest    string    `json:"digest" doc:"sha256:<hex> of the content: how services pin it."`
	Size      int64     `json:"size" doc:"Bytes."`
	CreatedAt time.Time `json:"createdAt" doc:"When it was first stored."`
}

type listArtifactsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"500" default:"100" doc:"Page size."`
	Cursor string `query:"cursor" maxLength:"200" doc:"nextCursor from the previous page."`
}

type listArtifactsOutput struct {
	Body struct {
		Artifacts  []StoredArtifact `json:"artifacts" doc:"Newest first."`
		NextCursor string           `json:"nextCursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

// An artifact cursor is the last item's createdAt and digest.
func encodeArtifactCursor(a artifactstore.Info) string {
	return encodeCursorPair(a.CreatedAt.UTC().Format(time.RFC3339Nano), a.Digest)
}

func decodeArtifactCursor(s string) (*artifactstore.Info, error) {
	at, digest, err := decodeCursorPair(s)
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, errBadCursor()
	}
	if _, err := artifact.ParseDigest(digest); err != nil {
		return nil, errBadCursor()
	}
	return &artifactstore.Info{Digest: digest, CreatedAt: t}, nil
}

type putArtifactOutput struct {
	Location string `header:"Location"`
	Body     ArtifactInfo
}

type getArtifactInput struct {
	Digest string `path:"digest" maxLength:"200" doc:"sha256:<hex>, or name@sha256:<hex>."`
}

// bodyKey carries a request's body stream to a handler that must not have
// Huma buffer it: an artifact can be hundreds of megabytes.
type bodyKey struct{}

const putArtifactID = "put-artifact"

// streamBody hands put-artifact its request body unread.
func streamBody(ctx huma.Context, next func(huma.Context)) {
	if ctx.Operation().OperationID == putArtifactID {
		ctx = huma.WithValue(ctx, bodyKey{}, ctx.BodyReader())
	}
	next(ctx)
}

func registerArtifacts(api huma.API, d Deps) {
	o := op(putArtifactID, http.MethodPut, "/artifacts",
		"Store a file (a service's executable) by its content: the answer is its digest. Storing the same bytes again "+
			"answers the same digest.", auth.RoleOperator, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusCreated
	o.RequestBody = &huma.RequestBody{
		Required:    true,
		Description: "The file's bytes.",
		Content:     map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}},
	}
	register(api, d, o, func(ctx context.Context, _ *struct{}) (*putArtifactOutput, error) {
		body, ok := ctx.Value(bodyKey{}).(io.Reader)
		if !ok {
			return nil, errs.Errorf(errs.Invalid, "The request has no body.")
		}
		info, err := d.Artifacts.Put(ctx, body, requester(ctx))
		if err != nil {
			return nil, err
		}
		return &putArtifactOutput{
			Location: Prefix + "/artifacts/" + info.Digest,
			Body:     ArtifactInfo{Digest: info.Digest, Size: info.Size, JournalID: ptrIfSet(info.JournalID)},
		}, nil
	})

	register(api, d, op("list-artifacts", http.MethodGet, "/artifacts",
		"List the stored artifacts, newest first: what a deploy can pin.", auth.RoleViewer, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *listArtifactsInput) (*listArtifactsOutput, error) {
			var after *artifactstore.Info
			if in.Cursor != "" {
				var err error
				if after, err = decodeArtifactCursor(in.Cursor); err != nil {
					return nil, err
				}
			}
			list, err := d.Artifacts.List(ctx, after, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &listArtifactsOutput{}
			if len(list) > in.Limit {
				list = list[:in.Limit]
				out.Body.NextCursor = encodeArtifactCursor(list[len(list)-1])
			}
			out.Body.Artifacts = make([]StoredArtifact, len(list))
			for i, a := range list {
				out.Body.Artifacts[i] = StoredArtifact{Digest: a.Digest, Size: a.Size, CreatedAt: a.CreatedAt}
			}
			return out, nil
		})

	g := op("get-artifact", http.MethodGet, "/artifacts/{digest}", "Download an artifact.", auth.RoleViewer,
		http.StatusNotFound, http.StatusUnprocessableEntity)
	g.Responses = map[string]*huma.Response{"200": {
		Description: "The artifact's bytes.",
		Content:     map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}},
	}}
	register(api, d, g, func(ctx context.Context, in *getArtifactInput) (*huma.StreamResponse, error) {
		info, err := d.Artifacts.Stat(ctx, in.Digest)
		if err != nil {
			return nil, err
		}
		return streamArtifact(ctx, d, info)
	})
}

// streamArtifact answers an artifact's bytes.
func streamArtifact(ctx context.Context, d Deps, info artifactstore.Info) (*huma.StreamResponse, error) {
	rc, err := d.Artifacts.Open(ctx, info.Digest)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer rc.Close()
		hctx.SetHeader("Content-Type", "application/octet-stream")
		hctx.SetHeader("Content-Length", strconv.FormatInt(info.Size, 10))
		hctx.SetHeader("Docker-Content-Digest", info.Digest)
		hctx.SetStatus(http.StatusOK)
		if _, err := io.Copy(hctx.BodyWriter(), rc); err != nil {
			// The status is sent; a broken stream is all the client can see.
			d.Logger.Warn("send artifact", "digest", info.Digest, "err", err)
		}
	}}, nil
}
