// Package phase times the steps of an action, as its receipt keeps them.
//
// It is a leaf: the host steps an agent takes record their phases with it,
// and an agent must import nothing that reaches a database (see package
// agent), so the type lives apart from the journal that stores it.
package phase

import "time"

// Phase is one step of an action and how long it took.
type Phase struct {
	Name string `json:"name"`
	Ms   int64  `json:"ms"`
}

// Phases records the steps of an action in the order they ran.
type Phases []Phase

// Do runs fn as the step name and records how long it took, whether or not
// it failed.
func (ps *Phases) Do(name string, fn func() error) error {
	begin := time.Now()
	err := fn()
	*ps = append(*ps, Phase{Name: name, Ms: time.Since(begin).Milliseconds()})
	return err
}
