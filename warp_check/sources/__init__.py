"""Where a suite's cases come from: files imported, labelled rows split by the model, unlabelled
text labelled by it, neighbourhoods written out, fixed cases promoted."""
