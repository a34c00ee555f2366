// Package runengine carries out the effects of seed 004's runs for the
// daemon: the runs in the node's care, their preparation, their holders,
// their deliveries and what the record says of them.
package runengine
