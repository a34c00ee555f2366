// Package fossilio is every effect OCX has on Fossil: reading artifacts, threads,
// tickets, branches, wiki pages, tags, users and who sent what from a repository
// file, and writing posts, ticket changes, wiki pages and tags as a given user so
// that the node's repository records that user.
//
// Reading opens the repository read-only with SQLite (OpenNode, OpenClone).
// Writing pushes one artifact over Fossil's sync protocol with a login card
// (Client). Administration of the node's own repository (users, the hook,
// the git mirror) and the workspace helpers (clone, open, pull) are in Admin
// and Workspace. docs/fossil.md describes what is read and written, and how.
package fossilio
