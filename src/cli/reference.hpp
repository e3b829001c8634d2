#pragma once

#include <string_view>

namespace chronicle::cli {

// The long text of `chronicle CMD --help`: what a subcommand does, how, and what it refuses, as
// prose after its options. `path` is the subcommand's name under `chronicle` ("record", "metrics
// serve", "ctl enable"; "" for `chronicle` itself). Empty for a subcommand with no text.
// docs/cli.md is generated from this help by scripts/cli-doc.sh, so this is its one source.
std::string_view reference_text(std::string_view path);

}  // namespace chronicle::cli
