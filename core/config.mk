# (empty until this area lands)
