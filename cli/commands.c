/* The table of alphast-run's subcommands, in the order --help lists them. */
#include <string.h>

#include "commands.h"

const cli_command cli_commands[] = {
    {"train", "train a model on a dataset (resumes an interrupted run)", cmd_train},
    {"sweep", "run the sweep a Lua script declares, in parallel and resumable", cmd_sweep},
    {"eval", "held-out evaluation of a trained run: model vs random cells", cmd_eval},
    {"sample", "generate the cells of a held-out split with a trained run (CSV or .h5ad)", cmd_sample},
    {"predict", "place the cells of a new dataset with a trained run (CSV or .h5ad)", cmd_predict},
    {"plugins", "list the plugins found, with their options", cmd_plugins},
    {"params", "parameter counts of a config's model, total and active, per module group", cmd_params},
    {"forward", "one eval forward pass of a model on tensors from a safetensors file", cmd_forward},
    {"report", "the ablation report of a sweep directory, as Markdown and one HTML page", cmd_report},
};

const int cli_n_commands = (int)(sizeof cli_commands / sizeof cli_commands[0]);

const cli_command *cli_command_find(const char *name)
{
    for (int i = 0; i < cli_n_commands; i++)
        if (!strcmp(cli_commands[i].name, name)) return &cli_commands[i];
    return NULL;
}
