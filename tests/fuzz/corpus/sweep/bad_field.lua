local a = require "alphast"
a.sweep{base = "tiny.yaml", seed = {1, 2}, schedule = {lr = 1e-3}}
