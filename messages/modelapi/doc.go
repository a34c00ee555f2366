// Package modelapi reads the model APIs' traffic as the node's model proxy
// passes it: the usage a reply reports (Tokens), whole or streamed, and the
// output bound a request asks for, capped as the body streams through.
package modelapi
