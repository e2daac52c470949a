# The AlphaSTomics network around its attention and FFN plugins, and the diffusion loss.
libalphast_la_SOURCES += core/model.c core/model_blocks.c core/model_embed.c core/model_layer.c \
	core/model_heads.c core/loss.c
noinst_HEADERS += core/model_internal.h core/include/alphast/loss.h
