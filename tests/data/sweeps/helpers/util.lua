-- A helper module for pure_library.lua: require "helpers.util" from the script's directory.
return {double = function(x) return 2 * x end}
