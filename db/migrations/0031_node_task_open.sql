-- 0031: the open host steps of a node, queued or claimed, found without a
-- scan: bounded-auto placement waits while a node it would change has one.
CREATE INDEX node_task_open ON node_task (node) WHERE state IN ('queued', 'claimed');
