package node_test

import (
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
)

// fix is the actions' one fixture (nodetest), under which this package's
// tests hang their own helpers.
type fix struct{ *nodetest.Fix }

func newFix(t *testing.T) *fix { return &fix{nodetest.New(t)} }

func newFixDaemon(t *testing.T) *fix { return &fix{nodetest.NewDaemon(t)} }

// The fixture's person and agent login.
const (
	person   = nodetest.Person
	personPW = nodetest.PersonPW
	agent    = nodetest.Agent
)
