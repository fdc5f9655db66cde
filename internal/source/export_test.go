package source

import "sluice/db"

// OpenSecret lets the tests read back what a source's row keeps sealed.
func (s *Service) OpenSecret(src *db.Source) (string, error) { return s.openSecret(src) }
