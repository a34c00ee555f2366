// Package mcp is the node's MCP server (D38): the tools and the artifacts
// a session reaches over its socket, and the client side of that socket.
package mcp
