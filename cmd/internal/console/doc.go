// Package console is OCX's web console (seed 000 "pages", seed 002 "console
// page opened" and "console button pressed"): focused pages that Fossil
// itself serves as its CGI extension (fossil server --extroot DIR), in the
// repository's own skin, one page per step, each showing one thing and
// offering its few actions, and the status JSON that clients poll.
//
// The viewer and their capabilities are Fossil's (FOSSIL_USER,
// FOSSIL_CAPABILITIES), never a form field, a query or a cookie parsed
// here; every button is a POST with a token bound to the viewer's login
// cookie and a same-origin Referer, pressed by a viewer holding admin or
// setup; every note is written as the viewer, by a push that carries the
// viewer's own login cookie (D30). docs/console.md has each page.
//
// The pages read by GET are consolepage's, which the daemon renders too
// (D71); this package adds the forms, the buttons' actions, the releases,
// the tools and patterns, and the git mirror, which `ocx console` serves.
package console
