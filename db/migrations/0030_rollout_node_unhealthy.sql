-- 0030: a node's answer to a rollout may be unhealthy: it runs the
-- generation, but its probe failed, and the rollout went on under
-- onProbeFailure observe.
ALTER TABLE rollout_node DROP CONSTRAINT rollout_node_state_check;
ALTER TABLE rollout_node ADD CONSTRAINT rollout_node_state_check
    CHECK (state IN ('active', 'failed', 'unknown', 'rolled_back', 'unhealthy'));
