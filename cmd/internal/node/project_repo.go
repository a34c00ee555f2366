package node

import "github.com/ocx-go/ocx/fossilio"

// ProjectRepo opens the node's repository of the named project ("" for
// the node's one project) and says the project's name; the caller closes
// the repository.
func (n *Node) ProjectRepo(name string) (string, *fossilio.Repo, error) {
	p, err := n.DefaultProject(name)
	if err != nil {
		return "", nil, err
	}
	r, err := n.OpenProjectRepo(p)
	if err != nil {
		return "", nil, err
	}
	return p.Name, r, nil
}
