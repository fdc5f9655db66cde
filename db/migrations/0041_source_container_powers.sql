-- 0041: the powers over its host that a source's containers may be given
-- (privileged, cap-add, devices, pid-host, network-host). None by default:
-- a container service asking for one is refused at sync, and at each
-- action, unless its source lists it.
ALTER TABLE source ADD COLUMN container_powers text[] NOT NULL DEFAULT '{}';
