-- Hydra's override grammar in a script: +, ++ and ~, {a:1} that merges,
-- and a grid of range(), choice() and a deletion every point makes.
local a = require "alphast"
local base = a.config("tiny.yaml"):override{
  "+monitors=[grad_norm]", "data.loading={rotation:false}", "~ffn", ["++training.patience"] = 3,
}
a.sweep{
  base = base,
  configs = a.grid{"training.epochs=range(1,3)", "attention=choice(linear, gated)", "~monitors"},
}
