-- Placeholder: migration 0009 (the attempts table) comes from its own change; this file
-- only keeps the numbering without gaps until then, and is replaced by it.
SELECT 1;
