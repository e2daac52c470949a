-- Never ends at top level (reproducer lua/l03): the instruction budget stops it.
local a = require "alphast"
while true do end
