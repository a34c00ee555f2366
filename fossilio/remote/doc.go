// Package remote is a node on another host (issue 25, D72): the
// receipts the server's node answers for its artifacts and the users it
// holds, asked over HTTP as the node user and kept in the node's clone
// (fossilio's vouched clone), and the pull that brings the clone up to
// date and has the server vouch for what it brought, and the listener
// of the server's pokes. The daemon's shell that runs actors/pull's
// decisions over these pulls is otherhosts.Puller.
package remote
