# External data (WikiPron, SyGuS): copied from the local mirror or downloaded at pinned commits,
# SHA-256 verified. Shared by all scales.


rule fetch_external:
    output:
        directory("data/external"),
    params:
        mirror=lambda wc: f"--mirror {config['mirror']}" if config.get("mirror") else "",
    log:
        "logs/external/fetch.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data fetch {params.mirror} --out {output} > {log} 2>&1"
