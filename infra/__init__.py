"""The CDK app that deploys the MCP server: one thin stack composed of one construct per capability."""
