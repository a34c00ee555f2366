// Package model is the node's side of an llm session's model: the node's
// model configuration, AGENTS/model.json, and the proxy `ocx mcp serve`
// offers each session on model.sock beside its MCP socket, which adds the
// model's key to what a runner sends so that the key never enters the
// sandbox, and counts the tokens of each reply against the session's limit
// (Meter, D50; docs/runners.md "native").
package model
