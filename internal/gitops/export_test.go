package gitops

import "sluice/db"

// OpenSecret lets the tests read back what a source's row keeps sealed.
func (s *Service) OpenSecret(src *db.Source) (string, error) { return s.openSecret(src) }

// ServiceNamesLockKey is the advisory lock a sync takes to give service
// names out, so that tests can hold syncs at it.
const ServiceNamesLockKey = serviceNamesLockKey
