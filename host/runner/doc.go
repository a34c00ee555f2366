// Package runner is the part every llm session's runner shares (D9): the
// turn's one line of JSON and its environment, the message the model gets
// for a turn, the conversation kept in the session's directory from turn
// to turn, a small client of the node's tools over MCP, and the one-line
// failure note a runner prints when a turn fails. docs/runners.md says
// what a runner sees and does.
package runner
