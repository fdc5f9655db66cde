package gitops

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
)

// UnitListParams filters and pages ListUnits.
type UnitListParams struct {
	Status, Kind, PathPrefix string // "" matches all
	Limit                    int    // default 100, at most 1000
	// After continues a page: units ordered after this (path, id).
	AfterPath string
	AfterID   uuid.UUID
}

// ListUnits returns units ordered by path.
func (s *Service) ListUnits(ctx context.Context, p UnitListParams) ([]*db.Unit, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	arg := &db.UnitListParams{MaxRows: int32(min(limit, 1001))}
	if p.Status != "" {
		arg.Status = &p.Status
	}
	if p.Kind != "" {
		arg.Kind = &p.Kind
	}
	if p.PathPrefix != "" {
		arg.PathPrefix = &p.PathPrefix
	}
	if p.AfterPath != "" {
		arg.AfterPath, arg.AfterID = &p.AfterPath, &p.AfterID
	}
	units, err := db.New(s.Pool).UnitList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("list units: %w", err)
	}
	return units, nil
}

// GetUnit returns one unit.
func (s *Service) GetUnit(ctx context.Context, id uuid.UUID) (*db.Unit, error) {
	u, err := db.New(s.Pool).UnitGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "Unit %s does not exist.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get unit %s: %w", id, err)
	}
	return u, nil
}
